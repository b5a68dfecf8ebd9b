"""Japanese legal text: normalisation, numerals, fugashi tokenization, contract structure, references,
diffs and structure checks. Deterministic answers to what LLM judges get wrong."""
