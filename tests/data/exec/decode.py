"""Script form of the exec tests' decode loop: `syncguard exec -- python decode.py ARGS`."""

from loopdemo.run import main

if __name__ == "__main__":
    main()
