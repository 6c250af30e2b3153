from recharness.cli import main

main()
