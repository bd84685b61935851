"""Install the straight start's new function: a start's own values as its 17 arguments,
every other column of the run, its STARTED event and its first step a constant of its text.

0019's function took all 45 columns as arguments, each converted and sent on every start.
This one is compiled from the same rows (the models' transitions applied once to template
rows, workflows/engine/compiled.py) and installed beside 0019's, which code deployed before
this migration still calls while it runs; a later migration may drop 0019's once no such
process is left. tests/workflows/test_functions.py checks the text is what the code
compiles now. PostgreSQL only: SQLite starts runs the general way.
"""

from django.db import migrations

START_RUN = 'CREATE OR REPLACE FUNCTION baton_start_run_ad57d1bc5af9(uuid, varchar, integer, jsonb, varchar, integer, timestamp with time zone, jsonb, timestamp with time zone, timestamp with time zone, jsonb, varchar, interval, timestamp with time zone, uuid, varchar, boolean)\nRETURNS TABLE (o_step_id bigint)\nLANGUAGE plpgsql AS $baton$\nBEGIN\nRETURN QUERY WITH run AS (INSERT INTO "workflows_workflowrun" ("id", "workflow_type", "workflow_version", "state", "input", "result", "error", "idempotency_key", "correlation_id", "started_by_id", "created_at", "started_at", "finished_at", "cancel_requested_at", "deadline_at", "updated_at", "parent_run_id", "parent_step_id", "trace_context") VALUES (($1)::uuid, ($2)::varchar, ($3)::integer, (\'running\')::varchar, ($4)::jsonb, (NULL)::jsonb, (NULL)::jsonb, (\'\')::varchar, ($5)::varchar, ($6)::integer, ($9)::timestamp with time zone, ($10)::timestamp with time zone, (NULL)::timestamp with time zone, (NULL)::timestamp with time zone, ($7)::timestamp with time zone, ($9)::timestamp with time zone, (NULL)::uuid, (NULL)::bigint, ($8)::jsonb)), event AS (INSERT INTO "workflows_stepevent" ("run_id", "step_id", "node", "kind", "attempt", "at", "detail") VALUES (($1)::uuid, (NULL)::bigint, (\'\')::varchar, (\'started\')::varchar, (0)::integer, ($10)::timestamp with time zone, ($11)::jsonb)), step AS (INSERT INTO "workflows_steprun" ("run_id", "node", "kind", "round", "item", "item_value", "state", "attempt", "due_at", "lease_token", "lease", "lease_holder", "scheduled_at", "started_at", "heartbeat_at", "finished_at", "result", "last_error", "last_traceback", "may_have_applied") VALUES (($1)::uuid, ($12)::varchar, (\'forward\')::varchar, (0)::smallint, (NULL)::integer, (NULL)::jsonb, (CASE WHEN $17 THEN \'running\' ELSE \'scheduled\' END)::varchar, (CASE WHEN $17 THEN 1 ELSE 0 END)::integer, ($14)::timestamp with time zone, (CASE WHEN $17 THEN $15 ELSE NULL END)::uuid, ($13)::interval, (CASE WHEN $17 THEN $16 ELSE \'\' END)::varchar, ($10)::timestamp with time zone, (CASE WHEN $17 THEN $10 ELSE NULL END)::timestamp with time zone, (NULL)::timestamp with time zone, (NULL)::timestamp with time zone, (NULL)::jsonb, (NULL)::jsonb, (\'\')::text, (false)::boolean) RETURNING "id") SELECT step."id" FROM step;\nEND\n$baton$'

DROP_START_RUN = "DROP FUNCTION IF EXISTS baton_start_run_ad57d1bc5af9(uuid, varchar, integer, jsonb, varchar, integer, timestamp with time zone, jsonb, timestamp with time zone, timestamp with time zone, jsonb, varchar, interval, timestamp with time zone, uuid, varchar, boolean)"


def install(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(START_RUN)


def uninstall(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP_START_RUN)


class Migration(migrations.Migration):
    dependencies = [("workflows", "0022_fewer_index_entries_per_start")]

    operations = [migrations.RunPython(install, uninstall)]
