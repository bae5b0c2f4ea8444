"""The builder of the moderation parts both services share: settings in, parts out, each part
replaceable in tests.

Every program that moderates (``modstream worker``, ``modstream online``, ``modstream rescore``)
runs on the same parts, made here and nowhere else (a ``protected`` import contract in
``pyproject.toml`` lets only the builders, this module, ``worker.parts`` and ``online.parts``,
import the clients, stores, source, processor and loops they are made of). Programs receive
parts and run them; tests hand in fakes instead of patching module names (arq's ``Worker`` takes
its functions; quix-streams' ``Application`` owns its parts).

- :func:`build_parts` makes what every program shares (:class:`ModerationParts`): metrics, the
  PostgreSQL pool and stores (the verdict write carrying the published marks,
  ``engine.stores.carried_marks``), the Kafka publisher, the inference client (the backend is
  chosen here), the rule stage and its strike cache, the outbox relay and the re-scorer.
- :func:`build_processor` is the one way a ``BatchProcessor`` is made; the stream's builder
  (``worker.parts``) and the online service's (``online.parts``) make theirs with it, each over
  its own acknowledger.

The stream's own parts (the Kafka source, the offset tracker's lanes, the background loops) and
``modstream rescan``'s are built by ``worker.parts`` over these.

The model backend is chosen in :func:`_inference` and nowhere else (``inference.backend``):
the KServe v2 gRPC client (``triton``, the default: Triton or MLServer) or the repository's own
model run in this process on a thread pool (``inprocess``, ``engine.inprocess``). The shadow
scorer (``engine.shadow``: a second inference handle, on ``triton.shadow_model_name``, whose
results are stored and never acted on) is one of the shared parts: :func:`build_parts` makes
it, :func:`build_processor` hands it every model batch, and each service runs its loop and
tells it when live work is saturated.
"""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Protocol

from common.logs import get_logger
from common.settings import KafkaSettings, PostgresSettings
from engine.failpoints import Failpoints
from engine.inference import InferenceClient, InferenceUnavailable
from engine.inprocess import InProcessModerationClient
from engine.metrics import Metrics, ReplicaMetrics
from engine.offsets import OffsetTracker
from engine.outbox import VerdictOutbox
from engine.policy_stage import PolicyStage
from engine.policy_watch import PolicyWatcher
from engine.processing import Acknowledger, BatchProcessor, BatchStore, Inference
from engine.publisher import KafkaPublisher
from engine.rescore import Rescorer
from engine.rule_stage import RuleStage
from engine.rules_watch import RulesWatcher
from engine.sender_strikes import StrikeCache
from engine.settings import (
    InferenceSettings,
    PolicyFileSettings,
    ReliabilitySettings,
    RulesSettings,
    TritonSettings,
)
from engine.shadow import ShadowScorer
from engine.stores.carried_marks import CarriedMarks
from engine.stores.database import Database
from engine.stores.pending_texts import PendingTextStore
from engine.stores.shadow_verdicts import ShadowVerdictStore
from engine.stores.strikes import StrikeStore
from engine.stores.verdict_batches import VerdictBatchStore
from engine.stores.verdict_outbox import VerdictOutboxStore
from engine.supervisor import stop_within
from engine.tenant_policy_watch import TenantPolicyWatcher
from engine.tenant_rules_watch import TenantRulesWatcher
from engine.triton import TritonModerationClient
from pipelines.policy import PolicyThresholds
from pipelines.policy_file import load_policy_file
from pipelines.rules import RuleEngine, default_ruleset
from pipelines.rules.layers import load_rule_stack
from pipelines.rules.shared_engines import EngineShelf

__all__ = [
    "ModerationParts",
    "ModerationSettings",
    "build_parts",
    "build_processor",
]

_log = get_logger(__name__)


class ModerationSettings(Protocol):
    """The sections every moderating program reads (``WorkerSettings``, ``OnlineSettings``)."""

    @property
    def kafka(self) -> KafkaSettings: ...

    @property
    def postgres(self) -> PostgresSettings: ...

    @property
    def triton(self) -> TritonSettings: ...

    @property
    def inference(self) -> InferenceSettings: ...

    @property
    def policy(self) -> PolicyThresholds: ...

    @property
    def policy_file(self) -> PolicyFileSettings: ...

    @property
    def rules(self) -> RulesSettings: ...

    @property
    def reliability(self) -> ReliabilitySettings: ...


@dataclass(slots=True)
class ModerationParts:
    """What every moderating program runs on. :func:`build_parts` makes the real ones."""

    metrics: Metrics
    database: Database
    verdicts: VerdictBatchStore
    """The one verdict write per batch; it carries the published marks queued in ``marks``."""
    outbox: VerdictOutboxStore
    marks: CarriedMarks
    """The batch processor's published-marker: marks queued for the next verdict write."""
    publisher: KafkaPublisher
    inference: InferenceClient
    rules: RuleStage
    policy: PolicyStage
    """The thresholds in use: ``policy`` settings, then the policy file, reloaded."""
    strikes: StrikeCache
    relay: VerdictOutbox
    rescorer: Rescorer
    rules_watch: RulesWatcher | None
    tenant_rules_watch: TenantRulesWatcher | None = None
    """Reloads the tenant folder's rule files (``None``: no folder, or no reloading)."""
    policy_watch: PolicyWatcher | None = None
    tenant_policy_watch: TenantPolicyWatcher | None = None
    """Reloads the tenant folder's policy files (``None``: no folder, or no reloading)."""
    shadow: ShadowScorer | None = None
    """Scores every model batch with ``triton.shadow_model_name`` (``None``: no shadow)."""
    give_up: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when a shutdown stops waiting: work blocked on a dependency that is down abandons."""

    async def open(self, stack: AsyncExitStack, *, ready_timeout_s: float | None) -> None:
        """Start the clients in order, each with a bounded stop on ``stack``: PostgreSQL (and
        the coming months' verdict partitions), the Kafka producer, the inference client
        (waited for up to ``ready_timeout_s``; ``None``: not waited for). A model that is not
        ready is no reason to stop: verdicts are rules-only (``pending_model``) until it is."""
        await self.database.start()
        stack.push_async_callback(stop_within, "postgres", self.database.stop, 1.0)
        await self.verdicts.ensure_partitions()
        await self.publisher.start()
        stack.push_async_callback(stop_within, "kafka_producer", self.publisher.stop, 0.5)
        await self.inference.start(wait_ready=False)
        stack.push_async_callback(stop_within, "inference", self.inference.stop, 0.5)
        if self.shadow is not None:
            # Never waited for: a shadow that is not ready only drops its work.
            await self.shadow.inference.start(wait_ready=False)
            stack.push_async_callback(stop_within, "shadow", self.shadow.inference.stop, 0.5)
        if ready_timeout_s is not None:
            try:
                await self.inference.wait_ready(ready_timeout_s)
            except InferenceUnavailable as exc:
                _log.warning("inference_not_ready", error=str(exc))


def _inference(
    inference: InferenceSettings, triton: TritonSettings, metrics: ReplicaMetrics | None
) -> InferenceClient:
    """The model backend (``inference.backend``) for the model ``triton`` names: the Triton gRPC
    client (any KServe v2 server) over the replicas, or the repository's model in this process.
    The live model and the shadow both come from here."""
    if inference.backend == "inprocess":
        return InProcessModerationClient(inference, triton, metrics=metrics)
    return TritonModerationClient(triton, metrics=metrics)


def _policy(
    settings: ModerationSettings, metrics: Metrics
) -> tuple[PolicyStage, PolicyWatcher | None]:
    """The thresholds in use (the policy file over the ``policy`` settings; a file that does
    not load stops the start, as a bad rule file does) and the file's watch."""
    f = settings.policy_file
    if f.path is None:
        return PolicyStage(settings.policy, metrics), None
    stage = PolicyStage(load_policy_file(f.path, settings.policy), metrics)
    watch = None
    if f.reload_interval_s > 0:
        watch = PolicyWatcher(
            f.path, f.reload_interval_s, settings.policy, stage.install, on_reject=stage.reject
        )
    return stage, watch


def _tenant_policies(
    settings: ModerationSettings, stage: PolicyStage
) -> TenantPolicyWatcher | None:
    """The tenant folder's policy files, loaded into ``stage`` now (a tenant file that does not
    load is refused and logged; the others and the default still start), and its watch;
    ``None`` without ``policy_file.tenants_dir``."""
    f = settings.policy_file
    if f.tenants_dir is None:
        return None
    watch = TenantPolicyWatcher(
        f.tenants_dir, f.reload_interval_s, stage, settings.policy, max_tenants=f.max_tenants
    )
    watch.load_all()
    return watch


def _shadow(
    settings: ModerationSettings, metrics: Metrics, database: Database, policy: PolicyStage
) -> ShadowScorer | None:
    """The shadow scorer over its own client of the configured backend (its own breakers; no
    replica metrics, which are the live model's), or ``None`` without
    ``triton.shadow_model_name``."""
    t = settings.triton
    if not t.shadow_model_name:
        return None
    model = {"model_name": t.shadow_model_name, "model_version": t.shadow_model_version}
    return ShadowScorer(
        inference=_inference(settings.inference, t.model_copy(update=model), None),
        store=ShadowVerdictStore(database),
        policy=policy,
        metrics=metrics,
        queue_batches=t.shadow_queue_batches,
    )


def _rule_engine(rules: RulesSettings) -> RuleEngine:
    """The default stack's engine: ``rules.path`` (a rule file, or a layer over another) or the
    shipped set."""
    return RuleEngine(load_rule_stack(rules.path).ruleset if rules.path else default_ruleset())


def _tenant_rules(rules: RulesSettings, stage: RuleStage) -> TenantRulesWatcher | None:
    """The tenant folder's rules, loaded into ``stage`` now (a tenant file that does not load
    is refused and logged; the others and the default still start), and its watch; ``None``
    without ``rules.tenants_dir``."""
    if rules.tenants_dir is None:
        return None
    shelf = EngineShelf(rules.max_stacks)
    shelf.add(stage.engine)
    watch = TenantRulesWatcher(
        rules.tenants_dir,
        rules.reload_interval_s,
        stage,
        shelf,
        max_tenants=rules.max_tenants,
    )
    watch.load_all()
    return watch


def build_parts(
    settings: ModerationSettings,
    *,
    consumer_group: str,
    light_reset: bool = False,
    metrics: Metrics | None = None,
) -> ModerationParts:
    """The shared parts (nothing is started). ``consumer_group`` names the program in the
    verdict store's offsets; ``light_reset``: the pool sends no reset query on release (for a
    program that never changes session state, see ``engine.stores.database``)."""
    metrics = metrics or Metrics()
    database = Database(settings.postgres, light_reset=light_reset)
    outbox = VerdictOutboxStore(database)
    publisher = KafkaPublisher(settings.kafka)
    inference = _inference(settings.inference, settings.triton, metrics.replicas)
    rel = settings.reliability
    marks = CarriedMarks(outbox, wait_s=rel.published_mark_wait_s)
    rules = RuleStage(_rule_engine(settings.rules), metrics)
    policy, policy_watch = _policy(settings, metrics)
    tenant_policy_watch = _tenant_policies(settings, policy)
    tenant_watch = _tenant_rules(settings.rules, rules)
    watch = None
    if settings.rules.path is not None and settings.rules.reload_interval_s > 0:
        watch = RulesWatcher(
            settings.rules.path,
            settings.rules.reload_interval_s,
            rules.install,
            on_reject=rules.reject,
        )
    return ModerationParts(
        metrics=metrics,
        database=database,
        verdicts=VerdictBatchStore(database, consumer_group, marks),
        outbox=outbox,
        marks=marks,
        publisher=publisher,
        inference=inference,
        rules=rules,
        policy=policy,
        strikes=StrikeCache(StrikeStore(database), ttl_s=settings.rules.strikes_ttl_s),
        relay=VerdictOutbox(
            outbox,
            publisher,
            settings.kafka.verdict_topic,
            min_age_s=rel.outbox_min_age_s,
            batch_items=rel.outbox_batch_items,
            on_relayed=metrics.outbox_relayed_total.inc,
            on_backlog=metrics.outbox_backlog_records.set,
        ),
        rescorer=Rescorer(
            inference=inference,
            store=PendingTextStore(database),
            outbox=outbox,
            publisher=publisher,
            policy=policy,
            verdict_topic=settings.kafka.verdict_topic,
            batch_items=rel.rescore_batch_items,
            on_rescored=metrics.rescored_total.inc,
            on_rejected=metrics.rescore_rejected_total.inc,
        ),
        rules_watch=watch,
        tenant_rules_watch=tenant_watch if settings.rules.reload_interval_s > 0 else None,
        policy_watch=policy_watch,
        tenant_policy_watch=(
            tenant_policy_watch if settings.policy_file.reload_interval_s > 0 else None
        ),
        shadow=_shadow(settings, metrics, database, policy),
    )


def build_processor(
    parts: ModerationParts,
    settings: ModerationSettings,
    *,
    acknowledger: Acknowledger,
    positions: OffsetTracker | None,
    store: BatchStore | None = None,
    inference: Inference | None = None,
    failpoints: Failpoints | None = None,
    publish_every_s: float | None = None,
) -> BatchProcessor:
    """The batch processor over ``parts``: ``acknowledger`` is told of durable batches,
    ``positions`` is the stream's offset tracker (``None`` for a source without offsets);
    ``store`` writes where a program writes more than the verdicts (the online claims);
    ``inference`` wraps the parts' client where a program bounds it (the online budget);
    what was published is marked by ``parts.marks``, on the next verdict write; with
    ``publish_every_s`` stored verdicts are published by the program's clock
    (``BatchProcessor.publish_stored``), not by each batch."""
    return BatchProcessor(
        inference=inference or parts.inference,
        store=store or parts.verdicts,
        outbox=parts.marks,
        publisher=parts.publisher,
        acknowledger=acknowledger,
        positions=positions,
        policy=parts.policy,
        verdict_topic=settings.kafka.verdict_topic,
        metrics=parts.metrics,
        give_up=parts.give_up,
        failpoints=failpoints,
        shadow=parts.shadow,
        publish_every_s=publish_every_s,
    )
