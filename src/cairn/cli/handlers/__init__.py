"""What the commands agents and hooks run per tool call or per task do and print; each command
of ``cairn.cli.commands`` declares its options, parses, and calls its handler here."""
