"""`python -m loopdemo ARGS`: the same loop as loopdemo.run."""

from loopdemo.run import main

main()
