"""vLLM as an engine: the backend (backend), the changes to vLLM's CPU start it installs for a load and removes after
it (patches), and its compile cache (cache)."""
