"""The selection budget in one package: its form, the controller that spends it, the scale it
pays for and the Verifier priced per judgement (see ``veriscale.selection``)."""
