"""The host process: the files syncguard writes and the untrusted files it reads, its own
descriptors, and its signals."""
