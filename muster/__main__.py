from muster.cli.main import main

main()
