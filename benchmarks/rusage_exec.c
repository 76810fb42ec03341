/* Run a command and report its peak resident set size exactly.
 *
 *   rusage_exec OUTFILE COMMAND [ARG...]
 *
 * Writes "<ru_maxrss in KiB> <wait status>" to OUTFILE and exits like the
 * command.  Why not os.wait4 from the harness directly: Linux keeps a
 * process's ru_maxrss across exec, so a command forked from the harness's
 * Python process would report at least the harness's own RSS.  Forked from
 * this tiny program instead, the command's ru_maxrss (which also covers its
 * waited-for children, e.g. worker processes) is its own.
 */
#include <errno.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: rusage_exec OUTFILE COMMAND [ARG...]\n");
        return 125;
    }
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 126;
    }
    if (pid == 0) {
        execvp(argv[2], argv + 2);
        perror(argv[2]);
        _exit(127);
    }
    int status = 0;
    struct rusage ru;
    while (wait4(pid, &status, 0, &ru) < 0) {
        if (errno != EINTR) {
            perror("wait4");
            return 126;
        }
    }
    FILE *out = fopen(argv[1], "w");
    if (out == NULL) {
        perror(argv[1]);
        return 126;
    }
    fprintf(out, "%ld %d\n", ru.ru_maxrss, status);
    fclose(out);
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    return 128 + WTERMSIG(status);
}
