from syncguard.cli import console_main

console_main()
