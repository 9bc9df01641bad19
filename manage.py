#!/usr/bin/env python
import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    from config.embedded import refusal_for_an_empty_data_dir

    refusal = refusal_for_an_empty_data_dir(sys.argv, os.environ)
    if refusal:
        sys.exit(refusal)
    if sys.argv[1:2] == ["services"]:
        # It reports on the embedded servers and stops them; it never starts them (config/embedded.py).
        os.environ["MNEMO_EMBEDDED_AUTOSTART"] = "0"
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
