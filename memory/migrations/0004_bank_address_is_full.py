# Renames only (issue 12): Bank.bank_id, the string address, read like the foreign key
# note.bank_id; Bank.full read like a verb. No data changes: Postgres keeps the unique constraint
# on the renamed column under its name, so only the migration state is told about it.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('memory', '0003_note_vectors'),
    ]

    operations = [
        migrations.RenameField(model_name='bank', old_name='bank_id', new_name='address'),
        migrations.RenameField(model_name='bank', old_name='full', new_name='is_full'),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterModelOptions(name='bank', options={'ordering': ['team', 'address']}),
                migrations.RemoveConstraint(model_name='bank', name='bank_unique_id_per_team'),
                migrations.AddConstraint(
                    model_name='bank',
                    constraint=models.UniqueConstraint(fields=('team', 'address'), name='bank_unique_id_per_team'),
                ),
            ],
            database_operations=[],
        ),
    ]
