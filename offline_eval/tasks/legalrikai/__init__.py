"""LegalRikai Open Benchmark: AmendExp, StatRev, ReqRev, RiskRev (data schemas so far)."""
