"""Human tasks: the reviewers' inbox, decisions, escalation and the audit trail."""
