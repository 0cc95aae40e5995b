"""The application: options, the run over many files, reports, the store, inspect."""
