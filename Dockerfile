# One image for web, workers and beat; docker-compose.yml picks the command.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /app

COPY pyproject.toml README.md LICENSE ./
COPY config ./config
COPY workflows ./workflows
COPY approvals ./approvals
RUN pip install --no-cache-dir .
COPY . .
RUN DJANGO_SECRET_KEY=build python manage.py collectstatic --noinput

RUN useradd --create-home baton && mkdir -p /var/lib/baton/media && chown baton /var/lib/baton/media
USER baton
EXPOSE 8000
CMD ["gunicorn", "config.wsgi", "--bind", "0.0.0.0:8000", "--workers", "3"]
