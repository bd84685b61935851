"""Single sign-on with an OpenID Connect provider (mozilla-django-oidc).

- `claims`: what a provider's claims say about an account (pure).
- `accounts`: make or update the account those claims describe, its groups and rights.
- `backends`: the authentication backends (the provider's, and passwords that
  BATON_LOCAL_LOGIN can turn off).
- `access_tokens`: the provider's access tokens, accepted by the API.
- `views`, `urls`: the login page with its SSO button, and the provider's round trip.
"""
