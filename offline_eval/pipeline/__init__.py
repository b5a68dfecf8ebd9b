"""The sweep's stages, each importing only those below it: plan (tasks, settings and their phases, built once;
the model loads), dryrun (the plan's token counts), execute (a model load's unit of work, and its failure
record), evaluate (judges and evaluators over the candidates' outputs), state (what an earlier sweep into the
folder left), analyses (leaderboards, ablations, verdicts, consistency, the tasks' own reports). `orchestrate.py`
runs them in order; the summary and the report come after."""
