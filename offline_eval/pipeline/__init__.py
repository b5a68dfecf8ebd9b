"""The sweep, from models.yaml to summary.json: the config (config), its plan (plan: tasks, settings and their
phases, built once; the model loads; thinking_checks), the dry run (dryrun), what an earlier sweep into the folder
left (state), a model load's unit of work (execute, on an executor: executors), the evaluators over the candidates'
outputs (evaluate), the analyses (leaderboards, ablations, verdicts, consistency), the Summary (build) and its
provenance (provenance). `orchestrate` runs them in order and writes the folder; each stage imports only those
below it."""
