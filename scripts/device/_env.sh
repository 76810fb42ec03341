# Sourced by the device A/B scripts (ab_env.sh, content_ab.sh): what they share.
#   install_wheels   cuaudit's dependencies, carried as wheels in .whl/, into /tmp/site (SKIP_WHEELS=1: not)
#   cu TREE          the command line of cuaudit run from the source tree TREE (src, or another checkout's)
#   warm_site        the audited site's files read once, so that every run finds them in the page cache
PY=${PY:-python3}
unset PYTHONPATH PYTHONDONTWRITEBYTECODE

install_wheels() {
  [ -n "${SKIP_WHEELS:-}" ] && return 0
  local out
  out=$($PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>&1) \
    || { echo "$out"; return 1; }
  echo "$out" | grep -v "^WARNING: Target" || true
}

cu() {
  echo "$PY -c \"import sys; sys.path[:0] = ['$PWD/$1', '/tmp/site']; sys.argv[0] = 'cuaudit'; from cuaudit.cli import entry; entry()\""
}

warm_site() {
  find "$($PY -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" -type f -size -64M -print0 | xargs -0 cat > /dev/null 2>&1
}
