"""Asking models: the typed requests and results (requests), what an answer must match (constraints), whether a
prompt fits a context (fit), the crash-safe store of every answer (store), the runner that serves requests from the
store or an engine in batches (runner), and the engines themselves (backends)."""
