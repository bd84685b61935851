"""Install the engine's hot-path functions: a step's claim, its straight record, a start.

Their text is compiled from the models (workflows/engine/functions.py) and frozen here;
tests/workflows/test_functions.py checks it is what the code compiles now. A state
machine (or a column) changed on a model changes a function's name, and needs a
migration that installs the new one. PostgreSQL only: SQLite sends the statements.
"""

from django.db import migrations

RECORD_STRAIGHT = 'CREATE OR REPLACE FUNCTION baton_record_straight_e62e49b25d1d(uuid, bigint, uuid, timestamp with time zone, timestamp with time zone, jsonb, smallint, varchar, interval, uuid, timestamp with time zone, varchar, boolean)\nRETURNS TABLE (o_next_step_id bigint, o_trace_context jsonb, o_scheduled_at timestamptz)\nLANGUAGE plpgsql AS $baton$\nBEGIN\nRETURN QUERY WITH run AS (SELECT "id", "trace_context" FROM "workflows_workflowrun" WHERE "id" = $1 AND "state" = ANY(\'{running,waiting}\') FOR UPDATE), done AS (UPDATE "workflows_steprun" AS step SET "state" = (\'succeeded\')::varchar, "due_at" = (NULL)::timestamp with time zone, "lease_token" = (NULL)::uuid, "finished_at" = ($4)::timestamp with time zone, "result" = ($6)::jsonb FROM run WHERE step."id" = $2 AND step."run_id" = run."id" AND step."state" = ANY(\'{running}\') AND step."lease_token" = $3 AND (step."due_at" IS NULL OR step."due_at" >= ($4)::timestamp with time zone) RETURNING step."id" AS "id", step."run_id" AS "run_id", step."node" AS "node", step."attempt" AS "attempt", step."scheduled_at" AS "scheduled_at"), woken AS (UPDATE "workflows_workflowrun" SET "state" = (\'running\')::varchar, "updated_at" = ($4)::timestamp with time zone WHERE "id" IN (SELECT "run_id" FROM done) AND "state" = ANY(\'{waiting}\')), events AS (INSERT INTO "workflows_stepevent" ("run_id", "step_id", "node", "kind", "attempt", "at", "detail") SELECT done."run_id", done."id", done."node", e."e_kind", done."attempt", e."e_at", e."e_detail" FROM done, (VALUES (0, (\'started\')::varchar, ($5)::timestamp with time zone, (\'{}\'::jsonb)::jsonb), (1, (\'completed\')::varchar, ($4)::timestamp with time zone, (\'{}\'::jsonb)::jsonb)) AS e ("order", "e_kind", "e_at", "e_detail") ORDER BY e."order"), next AS (INSERT INTO "workflows_steprun" ("run_id", "node", "kind", "round", "item", "item_value", "state", "attempt", "due_at", "lease_token", "lease", "lease_holder", "scheduled_at", "started_at", "heartbeat_at", "finished_at", "result", "last_error", "last_traceback", "may_have_applied") SELECT done."run_id", ($8)::varchar, (\'forward\')::varchar, ($7)::smallint, (NULL)::integer, (NULL)::jsonb, (CASE WHEN $13 THEN \'running\' ELSE \'scheduled\' END)::varchar, (CASE WHEN $13 THEN 1 ELSE 0 END)::integer, ($11)::timestamp with time zone, (CASE WHEN $13 THEN $10 ELSE NULL END)::uuid, ($9)::interval, (CASE WHEN $13 THEN $12 ELSE \'\' END)::varchar, ($4)::timestamp with time zone, (CASE WHEN $13 THEN $4 ELSE NULL END)::timestamp with time zone, (NULL)::timestamp with time zone, (NULL)::timestamp with time zone, (NULL)::jsonb, (NULL)::jsonb, (\'\')::text, (false)::boolean FROM done RETURNING "id") SELECT next."id", run."trace_context", done."scheduled_at" FROM next, run, done;\nEND\n$baton$'

DROP_RECORD_STRAIGHT = "DROP FUNCTION IF EXISTS baton_record_straight_e62e49b25d1d(uuid, bigint, uuid, timestamp with time zone, timestamp with time zone, jsonb, smallint, varchar, interval, uuid, timestamp with time zone, varchar, boolean)"

CLAIM_STEP = "CREATE OR REPLACE FUNCTION baton_claim_step_713011feab4f(bigint, uuid, timestamp with time zone, varchar, text[], boolean)\nRETURNS TABLE (o_steprun_node varchar, o_steprun_kind varchar, o_steprun_round smallint, o_steprun_attempt integer, o_steprun_item integer, o_steprun_item_value jsonb, o_workflowrun_id uuid, o_workflowrun_workflow_type varchar, o_workflowrun_workflow_version integer, o_workflowrun_input jsonb, o_workflowrun_correlation_id varchar)\nLANGUAGE plpgsql AS $baton$\nBEGIN\nIF $6 THEN PERFORM set_config('synchronous_commit', 'off', true); END IF;\nRETURN QUERY WITH run AS (\n    SELECT id, state, workflow_type, workflow_version, input, correlation_id\n    FROM workflows_workflowrun\n    WHERE id = (SELECT run_id FROM workflows_steprun WHERE id = $1)\n    FOR NO KEY UPDATE\n)\nUPDATE workflows_steprun AS step\nSET state = 'running', attempt = step.attempt + 1, lease_token = $2,\n    started_at = $3, heartbeat_at = NULL, due_at = $3 + step.lease,\n    lease_holder = $4\nFROM run\nWHERE step.id = $1 AND step.run_id = run.id\n  AND step.state = 'scheduled' AND step.lease IS NOT NULL\n  AND (step.kind <> 'forward' OR run.workflow_type || ':' || step.node <> ALL($5))\n  AND CASE WHEN step.kind = 'forward' THEN run.state IN ('running', 'waiting')\n      ELSE run.state IN ('compensating', 'cancelling', 'running', 'waiting') END\nRETURNING step.node, step.kind, step.round, step.attempt, step.item, step.item_value,\n    run.id, run.workflow_type, run.workflow_version, run.input, run.correlation_id;\nEND\n$baton$"

DROP_CLAIM_STEP = "DROP FUNCTION IF EXISTS baton_claim_step_713011feab4f(bigint, uuid, timestamp with time zone, varchar, text[], boolean)"

START_RUN = 'CREATE OR REPLACE FUNCTION baton_start_run_b22fe79857da(uuid, varchar, integer, varchar, jsonb, jsonb, jsonb, varchar, varchar, integer, timestamp with time zone, timestamp with time zone, timestamp with time zone, timestamp with time zone, timestamp with time zone, timestamp with time zone, uuid, bigint, jsonb, uuid, varchar, varchar, smallint, integer, jsonb, varchar, integer, timestamp with time zone, uuid, interval, varchar, timestamp with time zone, timestamp with time zone, timestamp with time zone, timestamp with time zone, jsonb, jsonb, text, boolean, uuid, varchar, varchar, integer, timestamp with time zone, jsonb)\nRETURNS TABLE (o_step_id bigint)\nLANGUAGE plpgsql AS $baton$\nBEGIN\nRETURN QUERY WITH run AS (INSERT INTO "workflows_workflowrun" ("id", "workflow_type", "workflow_version", "state", "input", "result", "error", "idempotency_key", "correlation_id", "started_by_id", "created_at", "started_at", "finished_at", "cancel_requested_at", "deadline_at", "updated_at", "parent_run_id", "parent_step_id", "trace_context") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)), event AS (INSERT INTO "workflows_stepevent" ("run_id", "node", "kind", "attempt", "at", "detail") VALUES ($40, $41, $42, $43, $44, $45)), step AS (INSERT INTO "workflows_steprun" ("run_id", "node", "kind", "round", "item", "item_value", "state", "attempt", "due_at", "lease_token", "lease", "lease_holder", "scheduled_at", "started_at", "heartbeat_at", "finished_at", "result", "last_error", "last_traceback", "may_have_applied") VALUES ($20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $35, $36, $37, $38, $39) RETURNING "id") SELECT step."id" FROM step;\nEND\n$baton$'

DROP_START_RUN = "DROP FUNCTION IF EXISTS baton_start_run_b22fe79857da(uuid, varchar, integer, varchar, jsonb, jsonb, jsonb, varchar, varchar, integer, timestamp with time zone, timestamp with time zone, timestamp with time zone, timestamp with time zone, timestamp with time zone, timestamp with time zone, uuid, bigint, jsonb, uuid, varchar, varchar, smallint, integer, jsonb, varchar, integer, timestamp with time zone, uuid, interval, varchar, timestamp with time zone, timestamp with time zone, timestamp with time zone, timestamp with time zone, jsonb, jsonb, text, boolean, uuid, varchar, varchar, integer, timestamp with time zone, jsonb)"


def install(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for sql in (RECORD_STRAIGHT, CLAIM_STEP, START_RUN):
        schema_editor.execute(sql)


def uninstall(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for sql in (DROP_RECORD_STRAIGHT, DROP_CLAIM_STEP, DROP_START_RUN):
        schema_editor.execute(sql)


class Migration(migrations.Migration):
    dependencies = [("workflows", "0018_restrict_deletes")]

    operations = [migrations.RunPython(install, uninstall)]
