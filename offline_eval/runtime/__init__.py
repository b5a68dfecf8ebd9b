"""The process around the engines: atomic files, the output lock, quiet native logs, the engine log, the network
guard, memory, preloaded libraries, timings, and the errors every layer raises. Imports nothing of offline_eval above."""
