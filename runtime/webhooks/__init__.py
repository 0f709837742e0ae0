"""Run notifications (CONTRACT §15): a run's summary POSTed, signed as the Standard Webhooks spec says,
when the run waits on a human or ends; delivered from a durable outbox by any server or worker.

``signing``: the secret and the signature; ``targets``: which URLs may be notified (no SSRF);
``store``: what the outbox needs of a store; ``sender``: the task that claims, sends and retries.
"""
