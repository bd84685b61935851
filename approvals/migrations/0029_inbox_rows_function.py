"""Install the inbox page's rows as a function: planned once per server connection, where
the statement was planned again on every page (about 0.2 ms of the server's time, twice
what it took to run).

Its text is compiled from the models and the inbox's queries (approvals.inbox.selectors.
rows_function) and frozen here; tests/approvals/test_inbox_rows_function.py checks it
is what the code compiles now. A change to the rows' SQL changes the function's name,
and needs a migration that installs the new one. PostgreSQL only: SQLite sends the
statement.
"""

from django.db import migrations

INBOX_ROWS = 'CREATE OR REPLACE FUNCTION baton_inbox_rows_a2c1ab80f58e(integer, uuid[], varchar[], varchar[])\nRETURNS TABLE (o_task_id uuid, o_run_id uuid, o_node varchar, o_kind varchar, o_workflow_type varchar, o_title varchar, o_state varchar, o_outcome varchar, o_sort_priority smallint, o_sort_due timestamp with time zone, o_version integer, o_workflow_version integer, o_assignee varchar, o_owner varchar, o_substitute_for varchar, o_started_by varchar, o_run_input jsonb, o_viewer_decisions jsonb[])\nLANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $baton$\nBEGIN\nRETURN QUERY SELECT entry.* FROM unnest($2) WITH ORDINALITY AS page(task_id, n) CROSS JOIN LATERAL (SELECT "approvals_inboxentry"."task_id" AS "task_id", "approvals_inboxentry"."run_id" AS "run_id", "approvals_inboxentry"."node" AS "node", "approvals_inboxentry"."kind" AS "kind", "approvals_inboxentry"."workflow_type" AS "workflow_type", "approvals_inboxentry"."title" AS "title", "approvals_inboxentry"."state" AS "state", "approvals_inboxentry"."outcome" AS "outcome", "approvals_inboxentry"."sort_priority" AS "sort_priority", "approvals_inboxentry"."sort_due" AS "sort_due", "approvals_inboxentry"."version" AS "version", "approvals_inboxentry"."workflow_version" AS "workflow_version", "approvals_inboxentry"."assignee" AS "assignee", "approvals_inboxentry"."owner" AS "owner", "approvals_inboxentry"."substitute_for" AS "substitute_for", "approvals_inboxentry"."started_by" AS "started_by", CASE WHEN "approvals_inboxentry"."workflow_type" = ANY($4) THEN (SELECT U0."input" AS "input" FROM "workflows_workflowrun" U0 WHERE U0."id" = ("approvals_inboxentry"."run_id") ORDER BY U0."created_at" DESC) ELSE NULL END AS "run_input", CASE WHEN "approvals_inboxentry"."workflow_type" = ANY($3) THEN ARRAY(SELECT JSONB_BUILD_OBJECT((\'node\')::text, U0."node", (\'outcome\')::text, U0."outcome", (\'decided_by_id\')::text, U0."decided_by_id", (\'decided_at\')::text, U0."decided_at") AS "json" FROM "approvals_humantask" U0 WHERE (U0."decided_by_id" = $1 AND U0."run_id" = ("approvals_inboxentry"."run_id") AND U0."kind" = \'approval\' AND U0."state" = \'completed\' AND NOT (U0."channel" = \'system\')) ORDER BY U0."decided_at" ASC, U0."id" ASC) ELSE NULL END AS "viewer_decisions" FROM "approvals_inboxentry" WHERE "approvals_inboxentry"."task_id" = (page.task_id) LIMIT 1) AS entry ORDER BY page.n;\nEND\n$baton$'

DROP_INBOX_ROWS = (
    "DROP FUNCTION IF EXISTS baton_inbox_rows_a2c1ab80f58e(integer, uuid[], varchar[], varchar[])"
)


def install(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    # No parameters: the text is sent as it is, a % in it never read as a placeholder.
    schema_editor.execute(INBOX_ROWS, params=None)


def uninstall(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(DROP_INBOX_ROWS, params=None)


class Migration(migrations.Migration):
    dependencies = [("approvals", "0028_task_ids_time_ordered")]

    operations = [migrations.RunPython(install, uninstall)]
