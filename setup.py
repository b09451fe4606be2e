"""Packaging for python_dynamodb_lock."""
import pathlib
import re

from setuptools import find_packages, setup

HERE = pathlib.Path(__file__).parent
VERSION = re.search(
    r"^__version__ = '([^']+)'",
    (HERE / 'python_dynamodb_lock' / '_version.py').read_text(),
    re.M,
).group(1)

setup(
    name='python_dynamodb_lock',
    version=VERSION,
    description='A distributed lock on Amazon DynamoDB: a drop-in, corrected python_dynamodb_lock',
    long_description=(HERE / 'README.rst').read_text(encoding='utf-8'),
    long_description_content_type='text/x-rst',
    license='Apache-2.0',
    packages=find_packages(include=['python_dynamodb_lock', 'python_dynamodb_lock.*']),
    package_data={'python_dynamodb_lock': ['py.typed']},
    python_requires='>=3.9',
    install_requires=['boto3>=1.26', 'botocore>=1.29'],
    extras_require={
        'demo': ['moto[server]>=5.0'],
        'test': ['pytest>=7', 'moto[dynamodb,server]>=5.0', 'hypothesis>=6.100'],
        'docs': ['sphinx>=7'],
        'lint': ['ruff>=0.5'],
    },
    entry_points={
        'console_scripts': ['dynamodb-lock=python_dynamodb_lock.__main__:main'],
    },
    classifiers=[
        'Development Status :: 4 - Beta',
        'Intended Audience :: Developers',
        'License :: OSI Approved :: Apache Software License',
        'Programming Language :: Python :: 3',
        'Programming Language :: Python :: 3 :: Only',
        'Typing :: Typed',
    ],
    zip_safe=False,
)
