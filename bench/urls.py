"""Baton's routes plus the bare baseline page."""

from django.urls import path

from bench import views
from config.urls import urlpatterns as baton_urlpatterns

urlpatterns = [path("bench/bare/", views.bare, name="bench_bare"), *baton_urlpatterns]
