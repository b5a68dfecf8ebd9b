"""What a sweep leaves: each run's per-item records and results files (records), summary.json's typed model
(summary), and the reading forward of summaries written by older versions (migrate)."""
