"""Install the inbox's tab counts as a function: planned once per server connection, where
the statement was planned again on every page (about 1 ms, more than it ran).

Its text is compiled from the models and the inbox's queries (approvals.inbox.selectors.
header_function) and frozen here; tests/approvals/test_inbox_header_function.py checks
it is what the code compiles now. A change to the counts' SQL changes the function's
name, and needs a migration that installs the new one. PostgreSQL only: SQLite sends
the statement.
"""

from django.db import migrations

INBOX_HEADER = 'CREATE OR REPLACE FUNCTION baton_inbox_header_61d43482ac10(integer, timestamp with time zone)\nRETURNS TABLE (o_mine bigint, o_queue bigint, o_delegated bigint, o_manages boolean, o_saved_id bigint, o_saved_name varchar, o_saved_query varchar)\nLANGUAGE plpgsql SET enable_seqscan = off SET enable_bitmapscan = off SET enable_sort = off SET enable_hashjoin = off SET plan_cache_mode = force_generic_plan AS $baton$\nBEGIN\nRETURN QUERY SELECT counts.*, saved.id, saved.name, saved.query FROM (SELECT (SELECT COUNT(*) FROM (SELECT "approvals_inboxentry"."task_id" AS "task_id" FROM "approvals_inboxentry" WHERE (NOT EXISTS(SELECT 1 AS "a" FROM "approvals_snooze" U0 WHERE (U0."task_id" = ("approvals_inboxentry"."task_id") AND U0."until" > $2 AND U0."user_id" = $1) LIMIT 1) AND "approvals_inboxentry"."tab" = \'mine\' AND "approvals_inboxentry"."user_id" = $1) ORDER BY "approvals_inboxentry"."sort_due" ASC, 1 ASC LIMIT 100) AS capped) AS mine, (SELECT COUNT(*) FROM (SELECT task_id FROM (SELECT DISTINCT sort_due, task_id FROM ((SELECT "approvals_inboxentry"."sort_due" AS "sort_due", "approvals_inboxentry"."task_id" AS "task_id" FROM "approvals_inboxentry" WHERE (NOT EXISTS(SELECT 1 AS "a" FROM "approvals_snooze" U0 WHERE (U0."task_id" = ("approvals_inboxentry"."task_id") AND U0."until" > $2 AND U0."user_id" = $1) LIMIT 1) AND "approvals_inboxentry"."tab" = \'queue\' AND "approvals_inboxentry"."user_id" = $1) ORDER BY 1 ASC, 2 ASC LIMIT 100) UNION ALL (SELECT streams.* FROM auth_user_groups AS membership CROSS JOIN LATERAL (SELECT "approvals_inboxentry"."sort_due" AS "sort_due", "approvals_inboxentry"."task_id" AS "task_id" FROM "approvals_inboxentry" WHERE (NOT EXISTS(SELECT 1 AS "a" FROM "approvals_snooze" U0 WHERE (U0."task_id" = ("approvals_inboxentry"."task_id") AND U0."until" > $2 AND U0."user_id" = $1) LIMIT 1) AND "approvals_inboxentry"."group_id" = (membership.group_id)) ORDER BY 1 ASC, 2 ASC LIMIT 100) AS streams WHERE membership.user_id = $1)) AS candidates ORDER BY sort_due, task_id LIMIT 100) AS page) AS capped) AS queue, (SELECT COUNT(*) FROM (SELECT "approvals_inboxentry"."task_id" AS "task_id" FROM "approvals_inboxentry" WHERE (NOT EXISTS(SELECT 1 AS "a" FROM "approvals_snooze" U0 WHERE (U0."task_id" = ("approvals_inboxentry"."task_id") AND U0."until" > $2 AND U0."user_id" = $1) LIMIT 1) AND "approvals_inboxentry"."tab" = \'delegated\' AND "approvals_inboxentry"."user_id" = $1) ORDER BY "approvals_inboxentry"."sort_due" ASC, 1 ASC LIMIT 100) AS capped) AS delegated, EXISTS (SELECT 1 FROM approvals_groupmanager WHERE manager_id = $1) AS manages) AS counts LEFT JOIN approvals_savedfilter AS saved ON saved.user_id = $1 ORDER BY saved.name;\nEND\n$baton$'

DROP_INBOX_HEADER = (
    "DROP FUNCTION IF EXISTS baton_inbox_header_61d43482ac10(integer, timestamp with time zone)"
)


def install(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    # No parameters: the text is sent as it is, a % in it never read as a placeholder.
    schema_editor.execute(INBOX_HEADER, params=None)


def uninstall(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(DROP_INBOX_HEADER, params=None)


class Migration(migrations.Migration):
    dependencies = [("approvals", "0026_fill_inbox_entry_view")]

    operations = [migrations.RunPython(install, uninstall)]
