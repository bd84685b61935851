"""Telling people: in-app notifications, emails, and the signed single-use links they carry.

Called by the use cases inside their transaction, sent on commit. It may import the
domain only; never the use cases or the pages.
"""
