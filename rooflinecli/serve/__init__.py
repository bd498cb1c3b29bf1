"""Serving under load: the steady state of an in-flight-batching engine (aggregated or
disaggregated), a discrete-event simulation over request streams, and the SLO search; every step
time from the one prediction path (``rooflinecli.predict``) through a ``steps.StepTable``."""
