# zklock: `make test` and `make demo` work on a machine with Python, Java, apt and this repo.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
# pytest workers for `make test`: the suite mostly waits (sessions expiring, retries, Spark
# starting), so two workers cut it by about 30% even on two cores (docs/spark.md); each has
# its own ZooKeeper and Spark
TEST_WORKERS ?= 2

# The ZooKeeper that the suite, the soaks and the demo run (docs/deploy.md, "Tested
# against"): debian, Debian's 3.8.0 under /usr/share/java (the default), or pyspark, the
# 3.9.5 whose server classes PySpark's own jars carry (zklock/servers/zookeeper.py)
ZOOKEEPER ?= debian
ifeq ($(ZOOKEEPER),pyspark)
export ZKLOCK_ZK_JARS = $(shell $(PY) -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__) + "/jars")')
else ifneq ($(ZOOKEEPER),debian)
$(error ZOOKEEPER is debian or pyspark, not $(ZOOKEEPER))
endif

# make flake-hunt: RUNS runs of HUNT (default: the whole suite) under load (scripts/flake_hunt.py)
RUNS ?= 3
HUNT ?=

.PHONY: dist flake-hunt soak soak-spark test-docs install zookeeper prometheus imports test test-compat demo zk-up zk-down bench bench-locks bench-fairness bench-spark bench-scheduler lint clean

$(STAMP): setup.cfg pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

zookeeper:
	@scripts/ensure-zookeeper.sh

prometheus: zookeeper  # (after it: one apt-get at a time)
	@scripts/ensure-prometheus.sh

# (the Spark chaos suite, the concurrent writers (each a Spark application of its own), the
# local-cluster cases and the streams' driver kill, marked soak, run apart: `make
# soak-spark`, which .ci/run runs after). The slowest tests are listed last: the suite stays
# under 15 minutes on 2 cores.
test: install zookeeper prometheus imports
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile -m "not soak and not docs" --durations=15

# every command README.md and docs/deploy.md show, as written, and deploy.md's image built;
# a dbt project with deploy.md's hooks (dbt in a venv of its own)
# as written: an operator's venv without PySpark, a Spark distribution locked by the child
# (a dozen Spark starts: apart from make test, which CI runs first)
test-docs: install zookeeper
	$(PY) -m pytest -q -m docs tests/cli/test_docs_commands.py tests/scripts/test_build_dist.py \
	  tests/spark/test_pipelines.py tests/cli/test_dbt_project.py

# the Spark-facing tests on PySpark 3.5.0, 4.0.0 and the newest 4.x (COMPAT_VERSIONS chooses)
test-compat: install zookeeper
	PYTHON=$(PYTHON) VENV=$(VENV) scripts/test-compat.sh

# the wheel, with zklock's JVM module prebuilt for every supported Spark line (docs/deploy.md)
dist: install
	$(PY) scripts/build_dist.py

flake-hunt: install zookeeper
	$(PY) scripts/flake_hunt.py --runs $(RUNS) $(HUNT)

imports: install
	VENV=$(VENV) scripts/lint-imports.sh

demo: install zookeeper
	$(PY) scripts/demo.py

zk-up: install zookeeper
	$(VENV)/bin/zklock server start

zk-down: install
	$(VENV)/bin/zklock server stop

bench-locks: install zookeeper
	$(PY) bench/locks.py

bench-fairness: install zookeeper
	$(PY) bench/fairness.py

bench-spark: install zookeeper
	$(PY) bench/spark_overhead.py

soak: install zookeeper
	ZKLOCK_CHAOS_SECONDS=$${ZKLOCK_CHAOS_SECONDS:-1200} ZKLOCK_CHAOS_REPORT=.zklock/soak.json \
		$(PY) -m pytest -q -s tests/core/test_chaos.py

# Spark applications under ensemble, connection, lock-node, lock-client and driver faults,
# judged by the data (tests/spark/test_spark_chaos.py): 150 s unless ZKLOCK_CHAOS_SECONDS;
# every kind of write by two threads at once, and by applications at once
# (tests/spark/test_concurrent_writers.py, test_spark_concurrency.py); three scheduler
# processes exactly once, their leader killed, and on an ensemble under faults
# (tests/scheduler/test_scheduler_processes.py); the writers and a lost lock with executors
# in JVMs of their own (tests/spark/test_local_cluster.py); a stream's driver killed
# (tests/spark/test_streams.py)
soak-spark: install zookeeper
	ZKLOCK_CHAOS_SECONDS=$${ZKLOCK_CHAOS_SECONDS:-150} ZKLOCK_CHAOS_REPORT=.zklock/soak-spark.json \
		$(PY) -m pytest -q -s -m soak tests/spark/test_concurrent_writers.py tests/spark/test_spark_chaos.py \
		tests/spark/test_spark_concurrency.py \
		tests/scheduler/test_scheduler_processes.py tests/spark/test_local_cluster.py \
		tests/spark/test_streams.py tests/spark/test_lock_process.py \
		tests/spark/test_spark_connect_server.py

bench-scheduler: install zookeeper
	$(PY) bench/scheduler.py

bench: bench-locks bench-fairness bench-spark bench-scheduler

lint: install imports
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) .venv-compat .zklock build dist zklock/spark/jars *.egg-info .pytest_cache .ruff_cache
