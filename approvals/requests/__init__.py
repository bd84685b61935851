"""The requester's pages: start a request from a form, follow my requests, read one request,
revise it when it is sent back, withdraw it, comment on it.

It may import `approvals.human_tasks`, `approvals.notify`, `approvals.audit` and the
domain; never another room of pages (`inbox`, `console`).
"""
