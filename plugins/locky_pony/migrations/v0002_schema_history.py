"""Step 2: ``locky_schema_history``, one row per schema step with the time it ran.

The version itself stays in ``locky_meta`` (where 1.0.0 keeps it); the history tells an
operator when each step was applied. Steps that ran before this table existed (the 1.0.0
schema of an upgraded database) are recorded with no time.
"""

DESCRIPTION = "record each schema step and when it ran (locky_schema_history)"


def statements(dialect: str, collation: str) -> list[str]:
    if dialect == "MySQL":
        return [
            "CREATE TABLE `locky_schema_history` (\n"
            "  `version` INTEGER PRIMARY KEY,\n"
            "  `description` VARCHAR(255) NOT NULL,\n"
            "  `applied_at` DATETIME(6)\n"
            f")\nCOLLATE {collation}\nDEFAULT CHARSET utf8mb4\nENGINE InnoDB"
        ]
    stamp = "TIMESTAMP" if dialect == "PostgreSQL" else "DATETIME"
    return [
        'CREATE TABLE "locky_schema_history" (\n'
        '  "version" INTEGER PRIMARY KEY,\n'
        '  "description" VARCHAR(255) NOT NULL,\n'
        f'  "applied_at" {stamp}\n'
        ")"
    ]
