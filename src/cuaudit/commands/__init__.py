"""Subcommands of ``cuaudit``: one module each (``configure_parser`` + ``execute``)."""
