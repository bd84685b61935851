"""The run-data filter through the API: `GET /api/v1/tasks?where=amount>1000`."""

from __future__ import annotations


class TestTheApi:
    def test_filters_by_run_data(self, api_as, two_expenses):
        response = api_as("carol").get("/tasks", where="amount>1000")

        assert [item["id"] for item in response.json()["items"]] == [str(two_expenses[1].pk)]

    def test_a_bad_filter_is_422_naming_the_field(self, api_as, two_expenses):
        response = api_as("carol").get("/tasks", where="colour=red")

        assert response.status_code == 422
        assert response.json()["errors"][0]["field"] == "where"
        assert "colour is not a searchable field" in response.json()["detail"]
