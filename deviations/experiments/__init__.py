"""Experiments: live canaries (``canaries``) and paired interleaved A/B runs (``ab``)."""
