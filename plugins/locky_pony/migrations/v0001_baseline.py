"""Step 1: the schema of Locky 1.0.0, exactly as that release created it.

Frozen: written down from the 1.0.0 entity mapping (Pony's own DDL for each engine), so
that a new database made today and one made by 1.0.0 are the same before step 2 runs.
Never edit it; change the schema in a new step.
"""

DESCRIPTION = "the Locky 1.0.0 schema: users, groups, members, roles, sessions, throttle, grants, meta"

SQLITE = """\
CREATE TABLE "locky_grants" (
  "id" INTEGER PRIMARY KEY AUTOINCREMENT,
  "user_uuid" VARCHAR(36) NOT NULL,
  "role" VARCHAR(64) NOT NULL,
  CONSTRAINT "unq_locky_grants__user_uuid_role" UNIQUE ("user_uuid", "role")
);

CREATE TABLE "locky_groups" (
  "id" INTEGER PRIMARY KEY AUTOINCREMENT,
  "uuid" VARCHAR(36) UNIQUE NOT NULL,
  "created_at" DATETIME NOT NULL,
  "updated_at" DATETIME NOT NULL,
  "deleted_at" DATETIME,
  "del_token" BIGINT NOT NULL,
  "name" VARCHAR(255) NOT NULL,
  "description" VARCHAR(1024) NOT NULL,
  CONSTRAINT "unq_locky_groups__name_del_token" UNIQUE ("name", "del_token")
);

CREATE INDEX "idx_locky_groups__del_token_id" ON "locky_groups" ("del_token", "id");

CREATE TABLE "locky_login_throttle" (
  "key" VARCHAR(254) NOT NULL PRIMARY KEY,
  "window_start" REAL NOT NULL,
  "attempts" INTEGER NOT NULL
);

CREATE TABLE "locky_meta" (
  "key" VARCHAR(64) NOT NULL PRIMARY KEY,
  "number" BIGINT NOT NULL
);

CREATE TABLE "locky_roles" (
  "id" INTEGER PRIMARY KEY AUTOINCREMENT,
  "uuid" VARCHAR(36) UNIQUE NOT NULL,
  "created_at" DATETIME NOT NULL,
  "updated_at" DATETIME NOT NULL,
  "deleted_at" DATETIME,
  "del_token" BIGINT NOT NULL,
  "name" VARCHAR(64) NOT NULL,
  "description" VARCHAR(1024) NOT NULL,
  "permissions" JSON NOT NULL,
  "builtin" BOOLEAN NOT NULL,
  CONSTRAINT "unq_locky_roles__name_del_token" UNIQUE ("name", "del_token")
);

CREATE INDEX "idx_locky_roles__del_token_id" ON "locky_roles" ("del_token", "id");

CREATE TABLE "locky_sessions" (
  "id" INTEGER PRIMARY KEY AUTOINCREMENT,
  "uuid" VARCHAR(36) UNIQUE NOT NULL,
  "user_uuid" VARCHAR(36) NOT NULL,
  "created_at" DATETIME NOT NULL,
  "revoked_at" DATETIME,
  "refresh_jti" VARCHAR(64) NOT NULL
);

CREATE INDEX "idx_locky_sessions__user_uuid" ON "locky_sessions" ("user_uuid");

CREATE TABLE "locky_users" (
  "id" INTEGER PRIMARY KEY AUTOINCREMENT,
  "uuid" VARCHAR(36) UNIQUE NOT NULL,
  "created_at" DATETIME NOT NULL,
  "updated_at" DATETIME NOT NULL,
  "deleted_at" DATETIME,
  "del_token" BIGINT NOT NULL,
  "name" VARCHAR(255) NOT NULL,
  "email" VARCHAR(254) NOT NULL,
  "password_hash" VARCHAR(255) NOT NULL,
  CONSTRAINT "unq_locky_users__email_del_token" UNIQUE ("email", "del_token")
);

CREATE INDEX "idx_locky_users__del_token_id" ON "locky_users" ("del_token", "id");

CREATE TABLE "locky_members" (
  "id" INTEGER PRIMARY KEY AUTOINCREMENT,
  "uuid" VARCHAR(36) UNIQUE NOT NULL,
  "created_at" DATETIME NOT NULL,
  "updated_at" DATETIME NOT NULL,
  "deleted_at" DATETIME,
  "del_token" BIGINT NOT NULL,
  "group" INTEGER NOT NULL REFERENCES "locky_groups" ("id") ON DELETE CASCADE,
  "user" INTEGER NOT NULL REFERENCES "locky_users" ("id") ON DELETE CASCADE,
  "group_uuid" VARCHAR(36) NOT NULL,
  "user_uuid" VARCHAR(36) NOT NULL,
  "role" VARCHAR(64) NOT NULL,
  CONSTRAINT "unq_locky_members__group_user_del_token" UNIQUE ("group", "user", "del_token")
);

CREATE INDEX "idx_locky_members__del_token_id" ON "locky_members" ("del_token", "id");

CREATE INDEX "idx_locky_members__group_uuid_del_token_id" ON "locky_members" ("group_uuid", "del_token", "id");

CREATE INDEX "idx_locky_members__role_del_token_id" ON "locky_members" ("role", "del_token", "id");

CREATE INDEX "idx_locky_members__user" ON "locky_members" ("user");

CREATE INDEX "idx_locky_members__user_uuid_del_token_id" ON "locky_members" ("user_uuid", "del_token", "id")
"""

POSTGRESQL = """\
CREATE TABLE "locky_grants" (
  "id" BIGSERIAL PRIMARY KEY,
  "user_uuid" VARCHAR(36) NOT NULL,
  "role" VARCHAR(64) NOT NULL,
  CONSTRAINT "unq_locky_grants__user_uuid_role" UNIQUE ("user_uuid", "role")
);

CREATE TABLE "locky_groups" (
  "id" BIGSERIAL PRIMARY KEY,
  "uuid" VARCHAR(36) UNIQUE NOT NULL,
  "created_at" TIMESTAMP NOT NULL,
  "updated_at" TIMESTAMP NOT NULL,
  "deleted_at" TIMESTAMP,
  "del_token" BIGINT NOT NULL,
  "name" VARCHAR(255) NOT NULL,
  "description" VARCHAR(1024) NOT NULL,
  CONSTRAINT "unq_locky_groups__name_del_token" UNIQUE ("name", "del_token")
);

CREATE INDEX "idx_locky_groups__del_token_id" ON "locky_groups" ("del_token", "id");

CREATE TABLE "locky_login_throttle" (
  "key" VARCHAR(254) PRIMARY KEY,
  "window_start" DOUBLE PRECISION NOT NULL,
  "attempts" INTEGER NOT NULL
);

CREATE TABLE "locky_meta" (
  "key" VARCHAR(64) PRIMARY KEY,
  "number" BIGINT NOT NULL
);

CREATE TABLE "locky_roles" (
  "id" BIGSERIAL PRIMARY KEY,
  "uuid" VARCHAR(36) UNIQUE NOT NULL,
  "created_at" TIMESTAMP NOT NULL,
  "updated_at" TIMESTAMP NOT NULL,
  "deleted_at" TIMESTAMP,
  "del_token" BIGINT NOT NULL,
  "name" VARCHAR(64) NOT NULL,
  "description" VARCHAR(1024) NOT NULL,
  "permissions" JSONB NOT NULL,
  "builtin" BOOLEAN NOT NULL,
  CONSTRAINT "unq_locky_roles__name_del_token" UNIQUE ("name", "del_token")
);

CREATE INDEX "idx_locky_roles__del_token_id" ON "locky_roles" ("del_token", "id");

CREATE TABLE "locky_sessions" (
  "id" BIGSERIAL PRIMARY KEY,
  "uuid" VARCHAR(36) UNIQUE NOT NULL,
  "user_uuid" VARCHAR(36) NOT NULL,
  "created_at" TIMESTAMP NOT NULL,
  "revoked_at" TIMESTAMP,
  "refresh_jti" VARCHAR(64) NOT NULL
);

CREATE INDEX "idx_locky_sessions__user_uuid" ON "locky_sessions" ("user_uuid");

CREATE TABLE "locky_users" (
  "id" BIGSERIAL PRIMARY KEY,
  "uuid" VARCHAR(36) UNIQUE NOT NULL,
  "created_at" TIMESTAMP NOT NULL,
  "updated_at" TIMESTAMP NOT NULL,
  "deleted_at" TIMESTAMP,
  "del_token" BIGINT NOT NULL,
  "name" VARCHAR(255) NOT NULL,
  "email" VARCHAR(254) NOT NULL,
  "password_hash" VARCHAR(255) NOT NULL,
  CONSTRAINT "unq_locky_users__email_del_token" UNIQUE ("email", "del_token")
);

CREATE INDEX "idx_locky_users__del_token_id" ON "locky_users" ("del_token", "id");

CREATE TABLE "locky_members" (
  "id" BIGSERIAL PRIMARY KEY,
  "uuid" VARCHAR(36) UNIQUE NOT NULL,
  "created_at" TIMESTAMP NOT NULL,
  "updated_at" TIMESTAMP NOT NULL,
  "deleted_at" TIMESTAMP,
  "del_token" BIGINT NOT NULL,
  "group" BIGINT NOT NULL,
  "user" BIGINT NOT NULL,
  "group_uuid" VARCHAR(36) NOT NULL,
  "user_uuid" VARCHAR(36) NOT NULL,
  "role" VARCHAR(64) NOT NULL,
  CONSTRAINT "unq_locky_members__group_user_del_token" UNIQUE ("group", "user", "del_token")
);

CREATE INDEX "idx_locky_members__del_token_id" ON "locky_members" ("del_token", "id");

CREATE INDEX "idx_locky_members__group_uuid_del_token_id" ON "locky_members" ("group_uuid", "del_token", "id");

CREATE INDEX "idx_locky_members__role_del_token_id" ON "locky_members" ("role", "del_token", "id");

CREATE INDEX "idx_locky_members__user" ON "locky_members" ("user");

CREATE INDEX "idx_locky_members__user_uuid_del_token_id" ON "locky_members" ("user_uuid", "del_token", "id");

ALTER TABLE "locky_members" ADD CONSTRAINT "fk_locky_members__group" FOREIGN KEY ("group") REFERENCES "locky_groups" ("id") ON DELETE CASCADE;

ALTER TABLE "locky_members" ADD CONSTRAINT "fk_locky_members__user" FOREIGN KEY ("user") REFERENCES "locky_users" ("id") ON DELETE CASCADE
"""

# ``{collation}``: the binary collation the server offers (see ``entities.MYSQL_COLLATIONS``).
MYSQL = """\
CREATE TABLE `locky_grants` (
  `id` BIGINT PRIMARY KEY AUTO_INCREMENT,
  `user_uuid` VARCHAR(36) NOT NULL,
  `role` VARCHAR(64) NOT NULL,
  CONSTRAINT `unq_locky_grants__user_uuid_role` UNIQUE (`user_uuid`, `role`)
)
COLLATE {collation}
DEFAULT CHARSET utf8mb4
ENGINE InnoDB;

CREATE TABLE `locky_groups` (
  `id` BIGINT PRIMARY KEY AUTO_INCREMENT,
  `uuid` VARCHAR(36) UNIQUE NOT NULL,
  `created_at` DATETIME(6) NOT NULL,
  `updated_at` DATETIME(6) NOT NULL,
  `deleted_at` DATETIME(6),
  `del_token` BIGINT NOT NULL,
  `name` VARCHAR(255) NOT NULL,
  `description` VARCHAR(1024) NOT NULL,
  CONSTRAINT `unq_locky_groups__name_del_token` UNIQUE (`name`, `del_token`)
)
COLLATE {collation}
DEFAULT CHARSET utf8mb4
ENGINE InnoDB;

CREATE INDEX `idx_locky_groups__del_token_id` ON `locky_groups` (`del_token`, `id`);

CREATE TABLE `locky_login_throttle` (
  `key` VARCHAR(254) PRIMARY KEY,
  `window_start` DOUBLE NOT NULL,
  `attempts` INTEGER NOT NULL
)
COLLATE {collation}
DEFAULT CHARSET utf8mb4
ENGINE InnoDB;

CREATE TABLE `locky_meta` (
  `key` VARCHAR(64) PRIMARY KEY,
  `number` BIGINT NOT NULL
)
COLLATE {collation}
DEFAULT CHARSET utf8mb4
ENGINE InnoDB;

CREATE TABLE `locky_roles` (
  `id` BIGINT PRIMARY KEY AUTO_INCREMENT,
  `uuid` VARCHAR(36) UNIQUE NOT NULL,
  `created_at` DATETIME(6) NOT NULL,
  `updated_at` DATETIME(6) NOT NULL,
  `deleted_at` DATETIME(6),
  `del_token` BIGINT NOT NULL,
  `name` VARCHAR(64) NOT NULL,
  `description` VARCHAR(1024) NOT NULL,
  `permissions` JSON NOT NULL,
  `builtin` BOOLEAN NOT NULL,
  CONSTRAINT `unq_locky_roles__name_del_token` UNIQUE (`name`, `del_token`)
)
COLLATE {collation}
DEFAULT CHARSET utf8mb4
ENGINE InnoDB;

CREATE INDEX `idx_locky_roles__del_token_id` ON `locky_roles` (`del_token`, `id`);

CREATE TABLE `locky_sessions` (
  `id` BIGINT PRIMARY KEY AUTO_INCREMENT,
  `uuid` VARCHAR(36) UNIQUE NOT NULL,
  `user_uuid` VARCHAR(36) NOT NULL,
  `created_at` DATETIME(6) NOT NULL,
  `revoked_at` DATETIME(6),
  `refresh_jti` VARCHAR(64) NOT NULL
)
COLLATE {collation}
DEFAULT CHARSET utf8mb4
ENGINE InnoDB;

CREATE INDEX `idx_locky_sessions__user_uuid` ON `locky_sessions` (`user_uuid`);

CREATE TABLE `locky_users` (
  `id` BIGINT PRIMARY KEY AUTO_INCREMENT,
  `uuid` VARCHAR(36) UNIQUE NOT NULL,
  `created_at` DATETIME(6) NOT NULL,
  `updated_at` DATETIME(6) NOT NULL,
  `deleted_at` DATETIME(6),
  `del_token` BIGINT NOT NULL,
  `name` VARCHAR(255) NOT NULL,
  `email` VARCHAR(254) NOT NULL,
  `password_hash` VARCHAR(255) NOT NULL,
  CONSTRAINT `unq_locky_users__email_del_token` UNIQUE (`email`, `del_token`)
)
COLLATE {collation}
DEFAULT CHARSET utf8mb4
ENGINE InnoDB;

CREATE INDEX `idx_locky_users__del_token_id` ON `locky_users` (`del_token`, `id`);

CREATE TABLE `locky_members` (
  `id` BIGINT PRIMARY KEY AUTO_INCREMENT,
  `uuid` VARCHAR(36) UNIQUE NOT NULL,
  `created_at` DATETIME(6) NOT NULL,
  `updated_at` DATETIME(6) NOT NULL,
  `deleted_at` DATETIME(6),
  `del_token` BIGINT NOT NULL,
  `group` BIGINT NOT NULL,
  `user` BIGINT NOT NULL,
  `group_uuid` VARCHAR(36) NOT NULL,
  `user_uuid` VARCHAR(36) NOT NULL,
  `role` VARCHAR(64) NOT NULL,
  CONSTRAINT `unq_locky_members__group_user_del_token` UNIQUE (`group`, `user`, `del_token`)
)
COLLATE {collation}
DEFAULT CHARSET utf8mb4
ENGINE InnoDB;

CREATE INDEX `idx_locky_members__del_token_id` ON `locky_members` (`del_token`, `id`);

CREATE INDEX `idx_locky_members__group_uuid_del_token_id` ON `locky_members` (`group_uuid`, `del_token`, `id`);

CREATE INDEX `idx_locky_members__role_del_token_id` ON `locky_members` (`role`, `del_token`, `id`);

CREATE INDEX `idx_locky_members__user` ON `locky_members` (`user`);

CREATE INDEX `idx_locky_members__user_uuid_del_token_id` ON `locky_members` (`user_uuid`, `del_token`, `id`);

ALTER TABLE `locky_members` ADD CONSTRAINT `fk_locky_members__group` FOREIGN KEY (`group`) REFERENCES `locky_groups` (`id`) ON DELETE CASCADE;

ALTER TABLE `locky_members` ADD CONSTRAINT `fk_locky_members__user` FOREIGN KEY (`user`) REFERENCES `locky_users` (`id`) ON DELETE CASCADE
"""



def statements(dialect: str, collation: str) -> list[str]:
    text = {"SQLite": SQLITE, "PostgreSQL": POSTGRESQL, "MySQL": MYSQL}[dialect]
    quote = "`" if dialect == "MySQL" else '"'
    if dialect == "MySQL":
        text = text.replace("{collation}", collation)
    # 1.0.0 started the policy revision at 1 in the same session; the schema version
    # row is the runner's.
    meta = f"INSERT INTO {quote}locky_meta{quote} ({quote}key{quote}, {quote}number{quote}) VALUES ('policy_revision', 1)"
    return [part.strip() for part in text.split(";\n") if part.strip()] + [meta]
