"""Install the engine's functions for a run's last step: its claim returns who started
the run and which parent step waits for it, and its record ends the run in one statement.

The claim's new function (`baton_claim_step_*`, a new name for its new text) is installed
beside 0019's, which code deployed before this migration still calls while it runs; a
later migration may drop 0019's once no such worker is left. The record of a run's last
step (`baton_record_end_*`, workflows/engine/straight.py) is new. Their text is compiled
from the models and frozen here; tests/workflows/test_functions.py checks it is what the
code compiles now. PostgreSQL only: SQLite sends the statements.
"""

from django.db import migrations

CLAIM_STEP = "CREATE OR REPLACE FUNCTION baton_claim_step_ccaacc568d80(bigint, uuid, timestamp with time zone, varchar, text[], boolean)\nRETURNS TABLE (o_steprun_node varchar, o_steprun_kind varchar, o_steprun_round smallint, o_steprun_attempt integer, o_steprun_item integer, o_steprun_item_value jsonb, o_workflowrun_id uuid, o_workflowrun_workflow_type varchar, o_workflowrun_workflow_version integer, o_workflowrun_input jsonb, o_workflowrun_correlation_id varchar, o_workflowrun_started_by integer, o_workflowrun_parent_step bigint)\nLANGUAGE plpgsql AS $baton$\nBEGIN\nIF $6 THEN PERFORM set_config('synchronous_commit', 'off', true); END IF;\nRETURN QUERY WITH run AS (\n    SELECT id, state, workflow_type, workflow_version, input, correlation_id,\n        started_by_id, parent_step_id\n    FROM workflows_workflowrun\n    WHERE id = (SELECT run_id FROM workflows_steprun WHERE id = $1)\n    FOR NO KEY UPDATE\n)\nUPDATE workflows_steprun AS step\nSET state = 'running', attempt = step.attempt + 1, lease_token = $2,\n    started_at = $3, heartbeat_at = NULL, due_at = $3 + step.lease,\n    lease_holder = $4\nFROM run\nWHERE step.id = $1 AND step.run_id = run.id\n  AND step.state = 'scheduled' AND step.lease IS NOT NULL\n  AND (step.kind <> 'forward' OR run.workflow_type || ':' || step.node <> ALL($5))\n  AND CASE WHEN step.kind = 'forward' THEN run.state IN ('running', 'waiting')\n      ELSE run.state IN ('compensating', 'cancelling', 'running', 'waiting') END\nRETURNING step.node, step.kind, step.round, step.attempt, step.item, step.item_value,\n    run.id, run.workflow_type, run.workflow_version, run.input, run.correlation_id,\n    run.started_by_id, run.parent_step_id;\nEND\n$baton$"

DROP_CLAIM_STEP = "DROP FUNCTION IF EXISTS baton_claim_step_ccaacc568d80(bigint, uuid, timestamp with time zone, varchar, text[], boolean)"

RECORD_END = 'CREATE OR REPLACE FUNCTION baton_record_end_088c89fdad02(uuid, bigint, uuid, timestamp with time zone, timestamp with time zone, jsonb)\nRETURNS TABLE (o_scheduled_at timestamptz)\nLANGUAGE plpgsql AS $baton$\nBEGIN\nRETURN QUERY WITH run AS (SELECT "id", "trace_context" FROM "workflows_workflowrun" WHERE "id" = $1 AND "state" = ANY(\'{running,waiting}\') FOR UPDATE), done AS (UPDATE "workflows_steprun" AS step SET "state" = (\'succeeded\')::varchar, "due_at" = (NULL)::timestamp with time zone, "lease_token" = (NULL)::uuid, "finished_at" = ($4)::timestamp with time zone, "result" = ($6)::jsonb FROM run WHERE step."id" = $2 AND step."run_id" = run."id" AND step."state" = ANY(\'{running}\') AND step."lease_token" = $3 AND (step."due_at" IS NULL OR step."due_at" >= ($4)::timestamp with time zone) RETURNING step."id" AS "id", step."run_id" AS "run_id", step."node" AS "node", step."attempt" AS "attempt", step."scheduled_at" AS "scheduled_at"), ended AS (UPDATE "workflows_workflowrun" SET "state" = (\'succeeded\')::varchar, "result" = ($6)::jsonb, "finished_at" = ($4)::timestamp with time zone, "updated_at" = ($4)::timestamp with time zone WHERE "id" IN (SELECT "run_id" FROM done) AND "state" = ANY(\'{running,waiting}\') RETURNING "id" AS "id"), events AS (INSERT INTO "workflows_stepevent" ("run_id", "step_id", "node", "kind", "attempt", "at", "detail") SELECT "e"."run_id", "e"."step_id", "e"."node", "e"."kind", "e"."attempt", "e"."at", "e"."detail" FROM (SELECT 0 AS "order", done."run_id", done."id", done."node", (\'started\')::varchar, done."attempt", ($5)::timestamp with time zone, (\'{}\'::jsonb)::jsonb FROM done UNION ALL SELECT 1 AS "order", done."run_id", done."id", done."node", (\'completed\')::varchar, done."attempt", ($4)::timestamp with time zone, (\'{}\'::jsonb)::jsonb FROM done UNION ALL SELECT 2, ended."id", NULL, (\'\')::varchar, (\'completed\')::varchar, (0)::integer, ($4)::timestamp with time zone, (\'{}\'::jsonb)::jsonb FROM ended) AS "e" ("order", "run_id", "step_id", "node", "kind", "attempt", "at", "detail") ORDER BY "e"."order") SELECT done."scheduled_at" FROM done, ended;\nEND\n$baton$'

DROP_RECORD_END = "DROP FUNCTION IF EXISTS baton_record_end_088c89fdad02(uuid, bigint, uuid, timestamp with time zone, timestamp with time zone, jsonb)"


def install(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for sql in (CLAIM_STEP, RECORD_END):
        schema_editor.execute(sql)


def uninstall(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for sql in (DROP_CLAIM_STEP, DROP_RECORD_END):
        schema_editor.execute(sql)


class Migration(migrations.Migration):
    dependencies = [("workflows", "0019_engine_functions")]

    operations = [migrations.RunPython(install, uninstall)]
