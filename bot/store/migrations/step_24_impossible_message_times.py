"""Step 24: a message stored with a time past the year 9999 (a history imported with epoch
milliseconds taken for seconds: the year 55034) gets a time a date can show: the stored number
divided by 1000 when that is a possible time, else when its session was made (the import), else
now. Such a time broke every search that found the message. A time before the year 1 is set the
same way."""

from bot.store.migrations.step import Dialects, Step

SQLITE = """
        UPDATE messages SET created_at = CASE
            WHEN created_at > 253402300799 AND created_at / 1000 <= 253402300799
                THEN created_at / 1000
            ELSE coalesce(
                (SELECT s.created_at FROM sessions s WHERE s.id = messages.session_id),
                CAST(strftime('%s', 'now') AS REAL))
            END
        WHERE created_at > 253402300799 OR created_at < -62135596800;
        """

POSTGRES = """
        UPDATE messages SET created_at = CASE
            WHEN created_at > 253402300799 AND created_at / 1000 <= 253402300799
                THEN created_at / 1000
            ELSE coalesce(
                (SELECT s.created_at FROM sessions s WHERE s.id = messages.session_id),
                extract(epoch FROM now())::double precision)
            END
        WHERE created_at > 253402300799 OR created_at < -62135596800;
        """

STEP: Step = Dialects(sqlite=SQLITE, postgres=POSTGRES)
