"""`{% fixed_url %}` prints what `{% url %}` would, under any prefix and URL configuration."""

from __future__ import annotations

from django.template import Context, Template
from django.test.utils import override_settings
from django.urls import set_script_prefix

TEMPLATE = Template(
    "{% load fixed_urls %}{% fixed_url 'approvals:inbox' %} {% url 'approvals:inbox' %}"
    " {% fixed_url 'requests:new' %} {% url 'requests:new' %}"
)


def drawn() -> list[str]:
    return TEMPLATE.render(Context()).split()


class TestFixedUrl:
    def test_prints_what_url_prints(self):
        fixed, reversed_, fixed_new, reversed_new = drawn()

        assert (fixed, fixed_new) == (reversed_, reversed_new) == ("/", "/requests/new/")

    def test_follows_the_prefix_the_site_is_served_under(self):
        drawn()
        set_script_prefix("/baton/")
        try:
            fixed, reversed_, *_ = drawn()
        finally:
            set_script_prefix("/")

        assert fixed == reversed_ == "/baton/"
        assert drawn()[0] == "/"

    @override_settings(ROOT_URLCONF="tests.approvals.urls_elsewhere")
    def test_follows_a_changed_url_configuration(self):
        fixed, reversed_, *_ = drawn()

        assert fixed == reversed_ == "/elsewhere/"
