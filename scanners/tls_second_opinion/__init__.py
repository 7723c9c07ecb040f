"""The tls-second-opinion measurement (netsurvey new-measurement scaffold)."""
