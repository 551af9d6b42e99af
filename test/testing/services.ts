/** Where the tests find the real services (CI starts them; see .ci/run). */
export const rabbitMqUrl = process.env.PLANRUN_TEST_AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
export const postgresUrl = process.env.PLANRUN_TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
