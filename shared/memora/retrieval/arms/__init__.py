"""The retrievers of the fused read path, one module each, behind one protocol
(`base.Arm`), registered here by name in the order fusion and the trace list them."""

from memora.retrieval.arms.base import Arm, ArmContext, NamedEntities, Search
from memora.retrieval.arms.entity import EntityArm
from memora.retrieval.arms.graph import GraphArm
from memora.retrieval.arms.history import HistoryArm
from memora.retrieval.arms.keyword import KeywordArm
from memora.retrieval.arms.semantic import SemanticArm
from memora.retrieval.arms.temporal import TemporalArm

ARM_TYPES: tuple[type[Arm], ...] = (
    SemanticArm,
    KeywordArm,
    GraphArm,
    TemporalArm,
    EntityArm,
    HistoryArm,
)
ARMS = tuple(arm.name for arm in ARM_TYPES)

__all__ = ["ARMS", "ARM_TYPES", "Arm", "ArmContext", "NamedEntities", "Search"]
