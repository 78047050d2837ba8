from cairn.cli.app import main

main()
