"""The reviewer's pages: the inbox and its tabs, a task's page, decisions, hand-overs, and the
signed-in person's notifications and out-of-office; with the REST API of the same inbox.

Views translate a request into one call of `approvals.human_tasks` (or a selector here)
and render. It may import the use cases, `approvals.notify`, `approvals.audit` and the
domain; never another room of pages (`requests`, `console`).
"""
