from mulligan.strategies.base import Strategy
from mulligan.strategies.memory_option import READS_ONLY, WRITES

RETRY = Strategy("retry", "up to N attempts, nothing carried over", options=(WRITES, READS_ONLY))
