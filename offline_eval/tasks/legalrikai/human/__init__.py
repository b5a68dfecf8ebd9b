"""LegalRikai's human side: the scores annotators give (scores), the judges' agreement with them (agreement), the
judged numbers they calibrate (calibration) and the page on which they score (annotate)."""
