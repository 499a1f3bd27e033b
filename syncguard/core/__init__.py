"""What a sync is and who sees it: events, site naming, the hub and interceptors, the op models,
the guard and its step markers, the catalogue of sync cases, signal-safe patching, safe output
files, the one loader of untrusted files. See docs/architecture.md."""
