"""The operator's pages: the run console (find runs, see one whole, steer it), the task list,
versions, the SLA dashboard and its charts, with the console's REST API.

It may import `approvals.human_tasks`, `approvals.notify`, `approvals.audit` and the
domain; never another room of pages (`inbox`, `requests`).
"""
