from rooflinecli.cli import main

main()
